"""An Amanda rule pack: ONNX Runtime's contrib ops (domain ``com.microsoft``) as standard ops."""
