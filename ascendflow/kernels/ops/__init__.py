"""PyTorch references of the Ascend quantization ops, one per module (any device, float32/int32 arithmetic)."""
