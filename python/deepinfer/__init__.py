"""DeepInfer: an inference engine for the DeepSeek-V4 model family.

The native core (`deepinfer._core`) is C++; this package is the thin Python face over it.
"""

__version__ = "0.1.0"
