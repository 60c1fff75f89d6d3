"""HGOT — Hierarchical Graph of Thoughts (Fang et al. 2024), one module per part of the paper:

- ``method``   Algorithm 1 (traverse, probe, plan, stop, search, rewrite, infer) and the config
- ``quality``  the equations: thought quality from citation recall / precision (Eq. 1), the
               weighted vote (Eq. 2), confidence CI (Eq. 3), passage scores σ (Eqs. 4-8)
- ``graph``    the plan's dependency text as a DAG (C.1-C.3)
- ``prompts``  the prompts of Appendix C (Plan, Self-reflect, Formalize, Rewrite, Predict)
- ``demos``    Appendix D: demonstration kinds, filters, balanced / KNN selection (the runs
               that produce them are made by ``hopqa.bootstrap``)
"""

from hopqa.methods.hgot.graph import build_graph, parse_dependencies, parse_steps
from hopqa.methods.hgot.method import HGOT, HGOTConfig

__all__ = ["HGOT", "HGOTConfig", "build_graph", "parse_dependencies", "parse_steps"]
