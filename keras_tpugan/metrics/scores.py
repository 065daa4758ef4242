"""Sample-quality scores on a network's features and class probabilities.

- `frechet_distance`: FID's recipe (on a classifier's penultimate features,
  the Frechet classifier distance, FCD);
- `classifier_score`: the Inception score's recipe on class probabilities
  (10 is the ceiling for 10 balanced classes);
- `kernel_distance`: KID's recipe (unbiased MMD^2, cubic polynomial kernel),
  and `kernel_reference_terms`, one set's part of it computed once;
- `precision_recall`: Kynkaanniemi et al. (2019), on k-nearest-neighbour
  radii.
"""

import numpy as np


def frechet_distance(features_a, features_b):
    """Frechet distance between Gaussians fitted to two feature sets.

    `||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2))`, FID's formula
    (with a 1e-6 ridge on the covariances).

    Args:
        features_a: Array `(n, d)`.
        features_b: Array `(m, d)`.

    Returns:
        A float (0 for identical distributions).
    """
    a, b = np.asarray(features_a, "float64"), np.asarray(features_b, "float64")
    if min(len(a), len(b)) < 2:
        raise ValueError(
            "Expected at least 2 feature vectors in each set (a covariance "
            f"needs 2). Received: {len(a)} and {len(b)}. Score more images "
            "(a data set that small leaves too few held-out images)."
        )
    return frechet_distance_of(feature_statistics(a), feature_statistics(b))


def feature_statistics(features):
    """The mean and covariance of a feature set, as `frechet_distance_of` takes.

    Args:
        features: Array `(n, d)`, n >= 2.

    Returns:
        `(mean (d,), covariance (d, d))`, float64.
    """
    features = np.asarray(features, "float64")
    return features.mean(0), np.cov(features, rowvar=False)


def frechet_distance_of(statistics_a, statistics_b):
    """`frechet_distance` from each set's `feature_statistics`.

    Args:
        statistics_a: `(mean, covariance)` of one set.
        statistics_b: `(mean, covariance)` of the other.

    Returns:
        A float (0 for identical distributions).
    """
    (mu_a, cov_a), (mu_b, cov_b) = statistics_a, statistics_b
    # Dead ReLU features make the covariances singular: a tiny ridge keeps
    # the square root stable (it moves the distance by ~1e-6 * d).
    ridge = 1e-6 * np.eye(len(cov_a))
    # Tr((S_a S_b)^(1/2)) is the sum of the square roots of the eigenvalues
    # of S_a S_b (real and >= 0 for covariances): no matrix square root,
    # which scipy's `sqrtm` fails to find for some nearly singular products
    # of few samples ("Internal error in scipy.linalg.sqrtm: -102").
    eigenvalues = np.linalg.eigvals((cov_a + ridge) @ (cov_b + ridge)).real
    root_trace = np.sqrt(np.clip(eigenvalues, 0.0, None)).sum()
    distance = ((mu_a - mu_b) ** 2).sum() + np.trace(cov_a + cov_b) - 2.0 * root_trace
    # The true distance is >= 0; rounding in the square root of nearly
    # singular covariances (few samples) can leave it slightly below.
    return float(max(distance, 0.0))


def classifier_score(probabilities):
    """The Inception-score recipe: `exp(E_x KL(p(y|x) || p(y)))`.

    Args:
        probabilities: Array `(n, classes)` of class probabilities.

    Returns:
        A float between 1 and the number of classes.
    """
    p = np.clip(np.asarray(probabilities, "float64"), 1e-12, 1.0)
    marginal = p.mean(0, keepdims=True)
    return float(np.exp((p * (np.log(p) - np.log(marginal))).sum(1).mean()))


def kernel_distance(
    features_a,
    features_b,
    subset_size=1000,
    num_subsets=10,
    seed=0,
    reference_terms=None,
):
    """KID's recipe: unbiased MMD^2 with the kernel `(x.y / d + 1)^3`.

    Averaged over random subsets of both sets (each at most `subset_size`).
    When both sets fit in one subset every draw holds the whole of both, in
    another order, so the MMD is computed once (the draws would differ in
    rounding only).

    Args:
        features_a: Array `(n, d)`.
        features_b: Array `(m, d)`.
        subset_size: Examples per subset.
        num_subsets: Number of subsets averaged.
        seed: Seed of the subset draws.
        reference_terms: `features_a`'s own terms, from
            `kernel_reference_terms(features_a, len(features_b), ...)` with
            the same `subset_size`, `num_subsets` and `seed`: give them when
            one set is scored against many of the same size (a training
            run's real images), to compute them once (default: computed
            here). The result is the same either way.

    Returns:
        A float (about 0 for identical distributions; can be slightly
        negative, being unbiased).
    """
    a, b = np.asarray(features_a, "float64"), np.asarray(features_b, "float64")
    draws = _subset_draws(len(a), len(b), subset_size, num_subsets, seed)
    if reference_terms is None:
        reference_terms = _own_terms(a, draws, 0)
    elif len(reference_terms) != len(draws):
        raise ValueError(
            f"Expected {len(draws)} reference terms (one per subset draw of "
            f"{len(a)} against {len(b)} examples). Received: "
            f"{len(reference_terms)}. Compute them with kernel_reference_terms"
            "(features_a, len(features_b)) and the same subset_size, "
            "num_subsets and seed."
        )
    terms_b = _own_terms(b, draws, 1)
    values = [
        term_a + term_b - 2.0 * cross
        for term_a, term_b, cross in zip(
            reference_terms, terms_b, _cross_terms(a, b, draws), strict=True
        )
    ]
    return float(np.mean(values))


def kernel_reference_terms(
    features, other_size, subset_size=1000, num_subsets=10, seed=0
):
    """`features`' own terms of `kernel_distance(features, other)`.

    They depend on `features` and on the subset draws only, not on the
    other set's values: computed once, they serve every score against a
    set of `other_size` examples.

    Args:
        features: Array `(n, d)`: the first set of `kernel_distance`.
        other_size: Examples in the second set.
        subset_size: As `kernel_distance`.
        num_subsets: As `kernel_distance`.
        seed: As `kernel_distance`.

    Returns:
        A list of floats, one per subset draw, for `kernel_distance`'s
        `reference_terms`.

    Example:

    >>> rng = np.random.default_rng(0)
    >>> real, fake = rng.normal(size=(300, 8)), rng.normal(size=(100, 8))
    >>> terms = kernel_reference_terms(real, len(fake), subset_size=50)
    >>> kernel_distance(real, fake, subset_size=50, reference_terms=terms) == (
    ...     kernel_distance(real, fake, subset_size=50)
    ... )
    True
    """
    a = np.asarray(features, "float64")
    draws = _subset_draws(len(a), other_size, subset_size, num_subsets, seed)
    return _own_terms(a, draws, 0)


def _subset_draws(size_a, size_b, subset_size, num_subsets, seed):
    """KID's subset draws: `(rows of a, rows of b)` per subset."""
    m = min(subset_size, size_a, size_b)
    if m == size_a == size_b:
        num_subsets = 1
    rng = np.random.default_rng(seed)
    return [
        (rng.choice(size_a, m, replace=False), rng.choice(size_b, m, replace=False))
        for _ in range(num_subsets)
    ]


def _kernel(x, y):
    """`(x.y / d + 1)^3`, computed in place."""
    k = x @ y.T
    k /= x.shape[1]
    k += 1
    return k * k * k


def _cross_terms(a, b, draws):
    """The mean kernel between `a`'s and `b`'s subsets in each draw.

    When `b` fits in one subset it is drawn whole every time (in another
    order, which no mean depends on): a draw's term is then the mean, over
    its rows of `a`, of each row's mean kernel with all of `b`, and each
    row's is computed once for all the draws.
    """
    if len(b) != len(draws[0][1]):
        return [_kernel(a[rows_a], b[rows_b]).mean() for rows_a, rows_b in draws]
    used = np.unique(np.concatenate([rows_a for rows_a, _ in draws]))
    row_means = np.empty(len(a))
    for i in range(0, len(used), _CHUNK):
        rows = used[i : i + _CHUNK]
        row_means[rows] = _kernel(a[rows], b).mean(axis=1)
    return [row_means[rows_a].mean() for rows_a, _ in draws]


def _own_terms(x, draws, side):
    """The mean kernel over pairs of distinct examples of `x`'s subset in each
    draw. A set that fits in one subset is drawn whole every time (in
    another order), so its term is the same in every draw: computed once."""

    def within(subset):
        k = _kernel(subset, subset)
        return (k.sum() - np.trace(k)) / (len(subset) * (len(subset) - 1))

    if len(x) == len(draws[0][side]):
        return [within(x)] * len(draws)
    return [within(x[rows[side]]) for rows in draws]


def precision_recall(real_features, generated_features, k=3, max_samples=5000, seed=0):
    """Improved precision and recall (Kynkaanniemi et al., 2019).

    Each set's manifold is the union of balls around its feature vectors,
    each ball's radius the distance to the vector's `k`-th nearest
    neighbour in the same set. Precision is the fraction of generated
    vectors inside the real manifold (how many samples look real); recall
    the fraction of real vectors inside the generated manifold (how much of
    the real data the generator covers). Both sets are first cut to the
    same size (the smaller one's, at most `max_samples`, drawn with
    `seed`): the radii shrink as a set grows, so sets of unequal size
    would favour one side.

    Args:
        real_features: Array `(n, d)`.
        generated_features: Array `(m, d)`.
        k: The neighbour whose distance sets each radius (3 in the paper).
        max_samples: At most this many vectors of each set.
        seed: Seed of the draw that cuts the sets to one size.

    Returns:
        `(precision, recall)`, floats in [0, 1].

    Example:

    >>> rng = np.random.default_rng(0)
    >>> real = rng.normal(size=(200, 4))
    >>> precision_recall(real, np.full((200, 4), 10.0))  # all far away
    (0.0, 0.0)
    """
    a = np.asarray(real_features, "float64")
    b = np.asarray(generated_features, "float64")
    n = min(len(a), len(b), max_samples)
    if n <= k:
        raise ValueError(
            f"Expected more than k={k} feature vectors in each set (the radius "
            f"of each is the distance to its {k}-th neighbour). Received: "
            f"{len(a)} real and {len(b)} generated. Score more images."
        )
    rng = np.random.default_rng(seed)
    a = a[np.sort(rng.permutation(len(a))[:n])]
    b = b[np.sort(rng.permutation(len(b))[:n])]
    real_radii, fake_radii = _knn_radii(a, k), _knn_radii(b, k)
    # One pass over the generated-to-real distances serves both: a row's
    # generated image looks real if it lies in some real ball; a column's
    # real image is covered if it lies in some generated ball.
    looks_real, covered = np.zeros(n, bool), np.zeros(n, bool)
    for i in range(0, n, _CHUNK):
        d = _squared_distances(b[i : i + _CHUNK], a)
        looks_real[i : i + _CHUNK] = (d <= real_radii[None, :]).any(1)
        covered |= (d <= fake_radii[i : i + _CHUNK, None]).any(0)
    return float(looks_real.mean()), float(covered.mean())


# Rows of a distance matrix computed at a time (1,000 x 5,000 float64: 40 MB).
_CHUNK = 1000


def _squared_distances(x, y):
    squared = (x**2).sum(1)[:, None] + (y**2).sum(1)[None, :] - 2.0 * x @ y.T
    return np.maximum(squared, 0.0)


def _knn_radii(x, k):
    """Squared distance of each row to its k-th nearest other row."""
    radii = []
    for i in range(0, len(x), _CHUNK):
        d = _squared_distances(x[i : i + _CHUNK], x)
        # Column 0 of the sorted row is the row itself (distance 0).
        radii.append(np.partition(d, k, axis=1)[:, k])
    return np.concatenate(radii)
