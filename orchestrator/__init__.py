"""Blinded, paired A/B trials for SO-101 arms."""
__version__ = "0.1.0"
