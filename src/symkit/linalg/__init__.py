"""symkit.linalg"""
