"""TensorFlow for Amanda.

* :mod:`amanda_tf.namespace` - ``amanda/tensorflow/<installed version>``, whose schema lists every op of
  TensorFlow's op registry (generated once per release, then cached);
* :mod:`amanda_tf.types` - the ``tf`` type system (attribute types, port dtypes);
* :mod:`amanda_tf.dtypes` - TensorFlow's ``DataType`` table and the port dtype strings (``float32[1,784]``);
* :mod:`amanda_tf.attrs` - attribute values: ``AttrValue`` decoding and their JSON form.

TensorFlow is imported only by the functions that need it (see :mod:`amanda_tf.framework`), never on import;
importing the package arranges that the first ``import tensorflow`` keeps its start-up lines to what
``TF_CPP_MIN_LOG_LEVEL`` allows (:func:`amanda_tf.framework.install_quiet_import`).
"""

from __future__ import annotations

from .dtypes import DTYPES, TFDType, dtype_enum, dtype_from_enum, dtype_from_numpy, numpy_dtype, parse_dtype
from .framework import TensorFlowMissingError, find_tensorflow, import_tensorflow, install_quiet_import
from .namespace import TensorFlowNamespaces
from .types import TFTypeSystem

__version__ = "0.1.0"

# Whichever of the package's modules is imported first (a registry read from its cache imports the namespace and
# type modules, not the plugin's), the first `import tensorflow` after it honours TF_CPP_MIN_LOG_LEVEL, which the
# amanda command sets to 2, for the lines TensorFlow prints while loading
install_quiet_import()

__all__ = [
    "DTYPES",
    "TFDType",
    "TFTypeSystem",
    "TensorFlowMissingError",
    "TensorFlowNamespaces",
    "dtype_enum",
    "dtype_from_enum",
    "dtype_from_numpy",
    "find_tensorflow",
    "import_tensorflow",
    "numpy_dtype",
    "parse_dtype",
]
