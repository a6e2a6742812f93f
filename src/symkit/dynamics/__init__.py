"""symkit.dynamics"""
