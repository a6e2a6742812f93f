"""symkit.marglik"""
