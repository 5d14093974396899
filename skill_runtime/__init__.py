"""The Skill Runtime: manifest-v2 bundles, safe installation, and running them on Dora."""
