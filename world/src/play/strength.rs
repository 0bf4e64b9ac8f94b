//! How strong a new password is: the `zxcvbn` estimator, with the
//! character's name as an input (so "alicealice" is weak for Alice).

use zxcvbn::{Score, zxcvbn};

/// The weakest estimate a new password may have. `Two` is "more than 10^6
/// guesses": far beyond what the login limits let an online guesser try
/// (docs/operations.md, "Login limits at the shard"), while still letting
/// a player pick a memorable phrase.
const MIN_SCORE: Score = Score::Two;

/// Why a password is refused: the estimator's own warning and suggestions.
pub(super) fn too_weak(password: &str, name: &str) -> Option<String> {
    let estimate = zxcvbn(password, &[name]);
    if estimate.score() >= MIN_SCORE {
        return None;
    }
    let mut why: Vec<String> = Vec::new();
    if let Some(feedback) = estimate.feedback() {
        why.extend(feedback.warning().map(|w| w.to_string()));
        why.extend(feedback.suggestions().iter().map(ToString::to_string));
    }
    if why.is_empty() {
        why.push("it is too easy to guess".into());
    }
    Some(why.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_and_common_passwords_are_weak_with_the_estimators_words() {
        let why = too_weak("alicealice", "Alice").expect("the name twice is weak");
        assert!(why.contains("Repeats"), "{why}");
        let why = too_weak("password1", "Bob").expect("a common password is weak");
        assert!(why.contains("common password"), "{why}");
    }

    #[test]
    fn phrases_the_tests_and_players_use_are_strong_enough() {
        for pw in [
            "correct horse",
            "bench-password",
            "soak-password",
            "xkcd-battery-staple-9",
        ] {
            assert_eq!(too_weak(pw, "Alice"), None, "{pw}");
        }
    }
}
