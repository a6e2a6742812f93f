"""symkit.cli"""
