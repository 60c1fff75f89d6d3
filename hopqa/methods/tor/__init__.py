"""Tree of Reviews — a tree search over retrieved paragraphs (Jiapeng Li et al. 2024), and CoR:

- ``method``  the tree search (§3.1-3.4): reviews, actions, pruning, expansion, the config
- ``chain``   CoR, the chain-of-reviews baseline (§4.4, Table 13)
- ``review``  reading reviews and missing-paragraph completions forgivingly
- ``fusion``  the evidence pool, the reader's prompt filled to the context, Recall@15
- ``prompts`` Tables 7-13 and the hand-written demonstrations
"""

from hopqa.methods.tor.chain import ChainOfReviews, CoRConfig
from hopqa.methods.tor.method import ToRConfig, TreeOfReviews
from hopqa.methods.tor.review import Review, parse_mpc, parse_review

__all__ = [
    "ChainOfReviews",
    "CoRConfig",
    "Review",
    "ToRConfig",
    "TreeOfReviews",
    "parse_mpc",
    "parse_review",
]
