import calc

assert calc.add(2, 3) == 5
assert calc.subtract(10, 4) == 6, calc.subtract(10, 4)
assert calc.multiply(3, 4) == 12
assert calc.mean([1, 2]) == 1.5, calc.mean([1, 2])
assert calc.mean([2, 4, 6]) == 4
print("all tests passed")
