"""``streamglobe deploy``: the network in containers (the container ``Launcher``: ``project``)."""
