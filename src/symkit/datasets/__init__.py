"""symkit.datasets"""
