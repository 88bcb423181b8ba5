"""What views, checks and exports mean: view specs, their engines and reference, indexes, advisor checks."""
