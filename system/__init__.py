"""dtsim's system layer (ASTRA-sim's Sys); the package version lives here."""

__version__ = "0.1.0"
