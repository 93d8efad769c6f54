"""DLRM training-systems workbench: reproduce ESD, HET, RecD, Hotline and FlexShard at laptop scale."""

__version__ = "0.1.0"
