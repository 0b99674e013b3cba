"""Test helpers for hosts of sessionkeeper: in-memory doubles and the backend conformance suite."""
