"""Package discovery (the rest of the metadata is in pyproject.toml): every package under fsc/,
and every op folder under kernels/ installed beneath `fsc.kernels` (never a top-level
`kernels`, a name the Hugging Face `kernels` package owns)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["fsc", "fsc.*"]), "fsc.kernels",
              *(f"fsc.kernels.{p}" for p in find_packages("kernels"))],
    package_dir={"fsc.kernels": "kernels"},
    package_data={"fsc.corpora": ["*.txt.gz"]},  # the shipped natural text (fsc/corpora)
)
