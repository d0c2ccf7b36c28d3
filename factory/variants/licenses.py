"""The licences a published card may inherit: the Hugging Face Hub's licence identifiers.

A card's ``license`` header must be an identifier the Hub knows (its list:
https://huggingface.co/docs/hub/repositories-licenses). Each corpus states its own
(``factory.corpora.corpus.Corpus.license``); ``card_corpora`` checks them, so that a corpus whose licence
the Hub would not recognise is an error naming it, never a card that silently drops it. ``other`` and
``unknown`` are not accepted from a corpus: a derived set must say what it inherits.
"""

from __future__ import annotations

from collections.abc import Iterable

from factory.corpora import ADDING, corpus
from factory.corpora.corpus import Corpus
from factory.utils.errors import FactoryError

HUB_LICENSES = frozenset(
    """
    apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc
    cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0
    cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1
    agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc lppl-1.3c ms-pl mpl-2.0 odc-by odbl
    openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license llama2 gemma
    """.split()
)


def card_corpora(datasets: Iterable[str], where: str) -> list[Corpus]:
    """The corpora of a card's datasets, in the given order, each with a Hub licence id; a dataset the
    registry lacks, or a licence the Hub does not know, is a FactoryError naming it (``where``: what
    named the datasets, for the message)."""
    found = []
    for d in datasets:
        c = corpus(d, where)
        if c.license not in HUB_LICENSES:
            raise FactoryError(
                f"{where}: dataset {d!r} has licence {c.license!r}, which is not a Hugging Face Hub licence "
                "identifier (https://huggingface.co/docs/hub/repositories-licenses), so the card could not "
                f"state what the published data inherits. Set license in the CORPUS of {d}'s module to the "
                f"Hub's identifier of its licence, e.g. 'cc-by-sa-4.0' ({ADDING}); nothing was published"
            )
        found.append(c)
    return found
