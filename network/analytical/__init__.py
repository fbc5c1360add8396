"""Analytical network backends (ASTRA-sim's astra-network-analytical)."""
