// Added tokens of an HF tokenizer (special and control tokens such as <｜User｜> or </think>):
// id ↔ content, and the leftmost-longest matcher HF uses to split them out of raw text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace deepinfer::tokenizer {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
};

// Finds leftmost-longest occurrences of a fixed set of strings (a byte trie).
class TokenMatcher {
 public:
  TokenMatcher() { nodes_.resize(1); }
  void add(std::string_view content, TokenId id);
  bool empty() const { return nodes_.size() <= 1; }

  struct Match {
    size_t begin, end;
    TokenId id;
  };
  // First match at or after `from`; false if none.
  bool find(std::string_view text, size_t from, Match* m) const;

 private:
  struct Node {
    int32_t child[2] = {-1, -1};  // first child, next sibling
    uint8_t byte = 0;
    TokenId id = -1;  // terminal token id
  };
  int32_t child(int32_t node, uint8_t b) const;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

class AddedVocabulary {
 public:
  void add(AddedToken token);
  const AddedToken* find_id(TokenId id) const;
  const AddedToken* find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

  // Splits text into plain runs and added tokens the way HF does (non-normalized tokens first,
  // then normalized ones inside the remaining runs; the normalizer is the identity here).
  // Calls plain(begin, end) and token(id) in order.
  template <class Plain, class Token>
  void split(std::string_view text, Plain&& plain, Token&& token) const;

 private:
  template <class Plain, class Token>
  void split_normalized(std::string_view text, size_t begin, size_t end, Plain& plain,
                        Token& token) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  TokenMatcher raw_, normalized_;
};

template <class Plain, class Token>
void AddedVocabulary::split_normalized(std::string_view text, size_t begin, size_t end,
                                       Plain& plain, Token& token) const {
  const std::string_view run = text.substr(begin, end - begin);
  size_t pos = 0;
  TokenMatcher::Match m;
  while (pos < run.size() && normalized_.find(run, pos, &m)) {
    if (m.begin > pos) plain(begin + pos, begin + m.begin);
    token(m.id);
    pos = m.end;
  }
  if (pos < run.size()) plain(begin + pos, end);
}

template <class Plain, class Token>
void AddedVocabulary::split(std::string_view text, Plain&& plain, Token&& token) const {
  size_t pos = 0;
  TokenMatcher::Match m;
  while (pos < text.size() && raw_.find(text, pos, &m)) {
    if (m.begin > pos) split_normalized(text, pos, m.begin, plain, token);
    token(m.id);
    pos = m.end;
  }
  if (pos < text.size()) split_normalized(text, pos, text.size(), plain, token);
}

}  // namespace deepinfer::tokenizer
