from ranges import inclusive_range, range_sum

assert inclusive_range(1, 3) == [1, 2, 3], inclusive_range(1, 3)
assert inclusive_range(5, 5) == [5], inclusive_range(5, 5)
assert inclusive_range(4, 2) == [], inclusive_range(4, 2)
assert range_sum(1, 10) == 55, range_sum(1, 10)
print("all tests passed")
