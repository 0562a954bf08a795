// Added-token table and matcher (see added_vocabulary.h).
#include "tokenizer/added_vocabulary.h"

namespace deepinfer::tokenizer {

int32_t TokenMatcher::child(int32_t node, uint8_t b) const {
  for (int32_t c = nodes_[node].child[0]; c >= 0; c = nodes_[c].child[1]) {
    if (nodes_[c].byte == b) return c;
  }
  return -1;
}

void TokenMatcher::add(std::string_view content, TokenId id) {
  if (content.empty()) return;
  int32_t node = 0;
  for (unsigned char b : content) {
    int32_t next = child(node, b);
    if (next < 0) {
      Node n;
      n.byte = b;
      n.child[1] = nodes_[node].child[0];
      nodes_.push_back(n);
      next = static_cast<int32_t>(nodes_.size() - 1);
      nodes_[node].child[0] = next;
    }
    node = next;
  }
  if (nodes_[node].id < 0) nodes_[node].id = id;
  first_byte_[static_cast<uint8_t>(content[0])] = true;
}

bool TokenMatcher::find(std::string_view text, size_t from, Match* m) const {
  if (empty()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    int32_t node = 0;
    size_t best_end = 0;
    TokenId best_id = -1;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      if (nodes_[node].id >= 0) {
        best_end = j + 1;
        best_id = nodes_[node].id;
      }
    }
    if (best_id >= 0) {
      *m = {i, best_end, best_id};
      return true;
    }
  }
  return false;
}

void AddedVocabulary::add(AddedToken token) {
  if (by_content_.count(token.content) != 0 || by_id_.count(token.id) != 0) return;
  (token.normalized ? normalized_ : raw_).add(token.content, token.id);
  by_id_.emplace(token.id, tokens_.size());
  by_content_.emplace(token.content, tokens_.size());
  tokens_.push_back(std::move(token));
}

const AddedToken* AddedVocabulary::find_id(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace deepinfer::tokenizer
