"""Test plumbing written once: bounded waits, live servers, the fake clock."""
