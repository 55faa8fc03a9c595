"""Policies under test behind one interface (`base.Policy`)."""
