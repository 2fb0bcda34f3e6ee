"""The ``graphviz-autograd`` command and the model files it loads."""
