"""What a node shows of itself: metrics, traces and structured logs."""
