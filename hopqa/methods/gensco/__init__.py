"""GenSco — a generator decomposes, a scorer selects the passage sequence (Fazili et al. 2024):

- ``method``   Algorithm 1, the scorer's NLL (Eq. 2), the stopping rules of the three
               variants (Eq. 1 for -stop, Eq. 4 for -no-QD) and the config
- ``prompts``  Tables 6-9 (answer, decomposition, stop, scoring prompts)
"""

from hopqa.methods.gensco.method import GenSco, GenScoConfig, is_fin, parse_subquestion

__all__ = ["GenSco", "GenScoConfig", "is_fin", "parse_subquestion"]
