"""Builds the optional C loops of the walk and the DOT writer; everything else is in pyproject.toml.

Where no C compiler is found the build goes on without them, and the package runs
the same loops in Python (see graphviz_autograd/speedups.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "graphviz_autograd._speedups",
            sources=["graphviz_autograd/_speedups.c"],
            optional=True,
        )
    ]
)
