"""Where training already reports: TensorBoard, PyTorch Lightning, the transformers Trainer.

Each module imports its library when it is imported, and only then: install the
extra it needs (``pip install graphviz-autograd[tensorboard]``, ``[lightning]``).
"""
