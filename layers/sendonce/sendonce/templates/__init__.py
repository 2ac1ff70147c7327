"""Templates (CONTRACT section 13): named, versioned message content a send renders with its data."""
