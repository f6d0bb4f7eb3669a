"""Test helpers shared by several test modules (reading back what an end-to-end run left behind)."""
