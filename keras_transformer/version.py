"""The package's version, in a module of its own: the package root and
the preset files (`metadata.json`) read it, and the root imports the rest."""

__version__ = "0.1.0"
