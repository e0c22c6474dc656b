"""StreamGlobe's own vocabulary, shared by every package: ``streamglobe.units`` reads the sizes,
bit rates and durations of every flag and file. Pure: it imports nothing of the project."""
