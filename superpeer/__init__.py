"""The super-peer daemon: gRPC services over a node's stream tables, planner and data plane."""
