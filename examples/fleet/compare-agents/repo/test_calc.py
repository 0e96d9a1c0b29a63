import unittest

import calc


class TestAdd(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.add(2, 3), 5)


class TestSubtract(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.subtract(2, 3), -1)


class TestMultiply(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.multiply(4, 3), 12)


class TestSquare(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.square(-4), 16)


class TestNegate(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.negate(7), -7)


class TestDouble(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.double(21), 42)


class TestHalve(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.halve(7), 3)


class TestMaximum(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.maximum(2, 9), 9)


class TestMinimum(unittest.TestCase):
    def test(self):
        self.assertEqual(calc.minimum(2, 9), 2)


class TestIsEven(unittest.TestCase):
    def test(self):
        self.assertTrue(calc.is_even(10))
        self.assertFalse(calc.is_even(7))
