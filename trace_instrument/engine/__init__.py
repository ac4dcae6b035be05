"""Operations on a checkout (apply, check, remove, verify): they return results, never print or exit."""
