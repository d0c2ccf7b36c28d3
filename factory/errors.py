"""Errors that carry a human message; the CLI prints them as one paragraph (traceback only with --debug)."""


class FactoryError(Exception):
    """A failure the user can act on: bad input, bad parameters, a failed quality gate."""


class BadRecord(FactoryError):
    """One input record is malformed; says which record and which field."""

    def __init__(self, dataset: str, record_id: str, field: str, reason: str, where: str = ""):
        self.dataset, self.record_id, self.field, self.reason, self.where = (
            dataset,
            record_id,
            field,
            reason,
            where,
        )
        loc = f" ({where})" if where else ""
        super().__init__(f"{dataset} record {record_id!r}{loc}: field {field!r}: {reason}")

    def as_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "id": self.record_id,
            "field": self.field,
            "reason": self.reason,
            "where": self.where,
        }
