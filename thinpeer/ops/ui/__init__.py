"""The live web view of a StreamGlobe network (``streamglobe ui``): the backbone, every stream
along its route, subscriptions with their plans, load and traffic over time, and faults."""
