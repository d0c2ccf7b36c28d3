"""The README's picture is what the code draws: docs/img/audit.png.json holds the SHA-256 of the card the
image shows, as `make images` rendered it; the current code must render the same card."""

from __future__ import annotations

import json

from tests.readme_images import RECORD, digest, first_card


def test_the_readme_picture_matches_the_code_that_draws_it():
    record = json.loads(RECORD.read_text())
    question_id, html = first_card()
    assert (question_id, digest(html)) == (record["question_id"], record["card_sha256"]), (
        "docs/img/audit.png no longer shows what the code draws (the audit page's first real-graph card "
        "changed): run `make demo`, then `make images`, and commit the image with its .json"
    )
