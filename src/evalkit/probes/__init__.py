"""Probes: the checks behind the verdict's dimensions, one module per dimension.

A probe is a plan (the ordinary evalkit jobs it needs, each a child MLflow run) and a judge (a pure function
from those jobs' stored records to findings with evidence). Judges never train. The probes themselves land
with their issues (semantics, functional, stability, performance, consistency, customization, maintenance).
"""
