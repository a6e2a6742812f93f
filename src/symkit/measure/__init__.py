"""symkit.measure"""
