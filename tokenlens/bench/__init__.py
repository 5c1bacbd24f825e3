"""``tokenlens bench``: the speed matrix of a plan (methods x k x models x languages)."""
