"""How data outside StreamGlobe maps to and from its XML items: JSON values, lines, VOEvents."""
