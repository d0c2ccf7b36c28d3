"""Bootstrapping rounds: which policy generates a round, the stopping rule (``rounds``) and the report
(``report``)."""
