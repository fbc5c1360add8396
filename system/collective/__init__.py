"""Collective algorithms, one per module (ASTRA-sim: astraccl/native_collectives/collective_algorithm)."""
