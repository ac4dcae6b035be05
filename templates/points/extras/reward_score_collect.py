reward_scores = np.array(
    [metric["reward_score"] for chunk in metrics for metric in chunk], dtype=object
)
