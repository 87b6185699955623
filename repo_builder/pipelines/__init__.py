"""Model families (registry.py: one record each) and the generic build flow: model step, ensemble, writing."""
