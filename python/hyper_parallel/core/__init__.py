"""Hyper-Parallel namespace package."""
