import unittest

import wordcount


class WordcountTest(unittest.TestCase):
    def test_count(self):
        self.assertEqual(wordcount.count("a b, A!")["a"], 2)

    def test_top(self):
        self.assertEqual(wordcount.top("the cat and the hat"), [("the", 2)])


if __name__ == "__main__":
    unittest.main()
